"""Loading results into frames: one typed row per attempt (``load_results``), the long
frames of series, the columns monitors, paths, hosts, ceilings and flows add, and what each
column means."""
