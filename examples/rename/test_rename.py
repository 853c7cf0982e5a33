from dsh_acp.testing import golden_tests

test_wire = golden_tests("wire")
