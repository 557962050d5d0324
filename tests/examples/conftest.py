from tests.spark.fixtures import roost_node, spark

__all__ = ["roost_node", "spark"]
