"""CDK stacks and constructs that deploy Hourglass to AWS.

The stacks build from the deployment contract in ``lambdas/hourglass/contract.py``; ``cdk synth`` runs
``app.py`` without PYTHONPATH, so the Lambda asset root is put on the path here.
"""

import sys
from pathlib import Path

_LAMBDAS = str(Path(__file__).resolve().parents[1] / "lambdas")
if _LAMBDAS not in sys.path:
    sys.path.append(_LAMBDAS)
