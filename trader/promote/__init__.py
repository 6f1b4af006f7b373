"""`trader promote`: a paper record judged by stated thresholds, and the live settings it earns."""
