"""The Kafka admin commands: `roost topic`, `roost group` and `roost cluster status`, thin click
shells over roost.admin."""
