"""Files in and out of conversations: the content-addressed store and its references."""
