"""Bar files (CSV or Parquet, as people have them): `read.read_bar_file` finds the time and
price columns, places every time in UTC, sorts, drops duplicates and reports each fix."""
