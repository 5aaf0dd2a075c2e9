"""``claybot doctor``: what is wrong with this home and this machine, and how to fix it.

Each check returns ``Finding``s (ok / warn / fail, a one-line detail, the command that
fixes what is not ok); ``checkup`` runs them and applies the safe repairs. Nothing
here prints: the command (``claybot.cli.doctor_cmd``) shows the findings.
"""
