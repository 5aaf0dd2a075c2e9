"""The heartbeat: every task in one batch prompt, run by the single heartbeat agent."""
