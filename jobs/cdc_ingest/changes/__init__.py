"""From decoded messages to keyed, ordered changes aimed at target tables, and the batch's first
pass.
"""
