"""What people read about one pipeline execution, from AWS (`make report`, tools/report.py) or from the local
runner (the end of every local run): its record (record.py), the HTML/PNG report (report.py) and its MLflow
run (tracking.py). Imported by the tools and the local runner; imports neither."""
