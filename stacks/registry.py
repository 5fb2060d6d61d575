"""The account of the registry that serves the Deep Learning Containers in a stack's region (config/images.py).

A region known at synth gives the account itself (the settings refuse a region without one); an
environment-agnostic stack (region a token) gets a CloudFormation mapping, region -> account, looked up on
AWS::Region at deploy time. Deployed to a region the mapping lacks, the lookup fails the deployment: the standard
`Fn::FindInMap` has no fallback ("the inability to handle missing mappings",
https://docs.amazonaws.cn/en_us/AWSCloudFormation/latest/UserGuide/intrinsic-function-reference-findinmap-enhancements.html),
and none is given.
"""

from __future__ import annotations

from aws_cdk import Aws, CfnMapping, Stack, Token
from constructs import Construct

from config.images import DLC_REGISTRY_ACCOUNTS, dlc_registry_account

MAPPING_ID = "DlcRegistry"
ACCOUNT_KEY = "Account"


def registry_account(scope: Construct) -> str:
    """The registry account for the stack of `scope`: a literal, or a `Fn::FindInMap` token on AWS::Region."""
    stack = Stack.of(scope)
    if not Token.is_unresolved(stack.region):
        return dlc_registry_account(stack.region)
    mapping = stack.node.try_find_child(MAPPING_ID)
    if not isinstance(mapping, CfnMapping):
        mapping = CfnMapping(
            stack,
            MAPPING_ID,
            mapping={region: {ACCOUNT_KEY: account} for region, account in DLC_REGISTRY_ACCOUNTS.items()},
        )
    return mapping.find_in_map(Aws.REGION, ACCOUNT_KEY)
