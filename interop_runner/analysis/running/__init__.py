"""What the analysis gives a campaign while it runs: the estimate of its duration, the
progress bar with the time left, and the results cache filled as records are stored."""
