"""The conformance suite moved to ``clustersim.conformance`` (a test tool, outside the policy
package); this name is kept, as the same module, so that code written against it goes on working."""

import sys

from clustersim import conformance

sys.modules[__name__] = conformance
