"""libcst helpers every fact needs: the one walker pass, qualified names, lists, call arguments, static values, node positions and formatting-keeping edits."""
