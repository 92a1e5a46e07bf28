"""Calibration from a user's own measurements: public or private profiles turned into the
tables and files a spec names (`dse calibrate ...`)."""
