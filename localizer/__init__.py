"""The localizer: communication operator graph search and device scoring (Holmes §4.3-4.4)."""
