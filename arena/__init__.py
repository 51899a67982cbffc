"""The built-in headless arena (games bots play over the websocket protocol)."""
