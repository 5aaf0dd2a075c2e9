"""The Telegram connector: long polling, an allowlist, approval buttons, HTML replies."""
