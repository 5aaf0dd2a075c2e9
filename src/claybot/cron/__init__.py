"""Cron tasks: schedules in a time zone, durable runs, the scheduler."""
