"""Scripted agents that drive a live Airlock through the SDK (`manage.py simulate_agents`)."""
