"""The wire contract: ``commops.proto``, its generated code, and record codecs (``codec``)."""
