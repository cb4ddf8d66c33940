"""Model APIs, one per problem type: what a batch holds, the loss, the scores."""
