"""Bot runners: learning and scripted bots in threads and worker processes, gymnasium environments as
bots, and loading trained policies."""
