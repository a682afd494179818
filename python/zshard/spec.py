"""python -m zshard.spec MODULE:FUNCTION [--name NAME]

Prints the job spec's `model` object (JSON) of the torch.nn.Module that
FUNCTION (called with no arguments) returns, for a job file. Exit status 2
with one line on stderr for a bad argument or a module that fails to load.
"""

import argparse
import importlib
import json
import sys


def _fail(message):
    print("zshard.spec: %s" % message, file=sys.stderr)
    return 2


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m zshard.spec",
        description="print the job spec's model object of a PyTorch model")
    parser.add_argument("target", help="MODULE:FUNCTION returning the model")
    parser.add_argument("--name", default=None, help="the model's name")
    args = parser.parse_args(argv)
    module_name, sep, function_name = args.target.partition(":")
    if not sep or not module_name or not function_name:
        return _fail("target must be MODULE:FUNCTION, not '%s'" % args.target)
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # any import failure is the user's module's
        return _fail("cannot import '%s': %s" % (module_name, e))
    function = getattr(module, function_name, None)
    if not callable(function):
        return _fail("'%s' has no function '%s'" % (module_name,
                                                     function_name))
    from zshard.torch import model_spec
    try:
        spec = model_spec(function(), name=args.name)
    except (TypeError, ValueError) as e:
        return _fail(str(e))
    json.dump(spec, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
