# Configs and command lines that are wrong: each names the key or flag.
tiny_config "$dir/tiny.json"
probe cfg_unknown_key 1 20 "config: model.n_layers: unknown key" -- "$ztrain" train --config "$dir/tiny.json" --set model.n_layers=2
probe cfg_not_json 1 20 "is not valid JSON" -- "$ztrain" train --config /usr/share/common-licenses/GPL-3
probe cfg_missing 1 20 "cannot read '$dir/absent.json'" -- "$ztrain" train --config "$dir/absent.json"
probe cli_steps_word 2 20 "--steps expects an integer, got 'ten'" -- "$ztrain" train --config "$dir/tiny.json" --steps ten
