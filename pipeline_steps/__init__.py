"""Typed settings -> SageMaker Pipeline definition JSON. The only SageMaker-SDK code; knows nothing of CDK."""
