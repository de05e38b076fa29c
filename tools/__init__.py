"""Developer tools of a gliding_actors checkout; not part of the installed package.

``tools.reliability`` holds the harnesses behind ``gliding-actors bench
reliability`` (kills, fault injection, fuzzing, linearizability checking); the
bench loads them from the checkout it was installed from.
"""
