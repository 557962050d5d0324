"""Trending hashtags on Spark: posts in, a sliding-window top N per window out, through Roost."""
