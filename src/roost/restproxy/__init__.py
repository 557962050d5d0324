"""REST proxy (Confluent REST Proxy v2 consumers, v3 topics and records), served beside the registry."""
