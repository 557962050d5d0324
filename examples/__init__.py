"""Roost's scenarios as runnable examples: `messenger` (async tasks) and `trending` (Spark)."""
