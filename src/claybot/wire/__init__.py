"""What each route answers, as pydantic models: the response schemas of the OpenAPI document.

One module per resource, like the routers. The models describe the bodies the
engine has always sent, field for field and in the same order (``base.py`` says
how the bytes stay the same).
"""
