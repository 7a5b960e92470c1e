"""Archive viewer: web pages over the Slack archive and the follower network."""
