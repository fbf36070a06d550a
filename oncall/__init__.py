"""On-call: alerts from incidents (``sleuth alerter``), the incident commands, verdicts as training labels."""
