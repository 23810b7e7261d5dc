"""The context engine: carrying out compaction plans with a summariser."""
