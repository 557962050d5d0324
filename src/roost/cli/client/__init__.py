"""What every client command shares: where the cluster is and how to reach it (options, profiles),
errors, and output as text, JSON or YAML."""
