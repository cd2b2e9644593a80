"""CDK stacks and constructs that deploy Hourglass to AWS."""
