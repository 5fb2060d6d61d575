"""Extractive question answering: data validation, features, training helpers, metrics.

Plain Python on the libraries preinstalled in the Hugging Face training images; nothing here knows about
CDK, the pipeline definition or the project settings.
"""
