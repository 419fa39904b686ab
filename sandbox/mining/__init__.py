"""Tasks mined from a repository's own history (`leafcost mine`): see pipeline.py."""
