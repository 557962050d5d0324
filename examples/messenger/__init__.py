"""The messenger scenario: async tasks on Roost (notify, email the inactive, analytics)."""
