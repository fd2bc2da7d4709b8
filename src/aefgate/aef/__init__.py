"""AEF 1.0 (the Agent Evaluation Format): the hub format of aefgate (schemas, reading, writing,
verifying)."""
