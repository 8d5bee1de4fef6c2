"""The operator layer: what people and scripts use to run and inspect trawl.

The CLI, the Python client, the local stack and its supervisor, the admin API and dashboard,
payload diffs and replay. It sits above the services and may import any of them; nothing below
imports it.
"""
