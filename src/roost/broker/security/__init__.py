"""Who a client is (principals), and later how it proves it (TLS, SASL) and what it may do (ACLs)."""
