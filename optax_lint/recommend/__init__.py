"""`optax-lint recommend`: the decision protocol (rules/protocol.toml) run forwards.

request  -> what the user asks, checked (errors name the flag)
decide   -> the protocol's rows chosen, with a trace
codegen  -> the configuration block and a runnable module
memory   -> params + grads + state per device, the verdict, and what fits otherwise
advice   -> risks, monitoring, divergence, checkpointing
render   -> text and JSON
compare  -> `--from train.py`: the script's chain against the recommendation
verify   -> `--verify`: the chain built and stepped under JAX (worker sandbox)
"""
