"""CDK stacks: settings (+ the pipeline definition) -> CloudFormation. The only CDK code."""
