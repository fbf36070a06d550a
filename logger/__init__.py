"""The CommOps logger: times every communication operator of a training job (see issue: logger)."""
