"""Network access that checks where it goes."""
