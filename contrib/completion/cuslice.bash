# bash completion for cuslice (docs/cli.md). Installed by meson as
# share/bash-completion/completions/cuslice; tests/cli/test-completion.sh
# checks it. Group names come from the daemon (`cuslice groups`), when it
# answers; nothing is completed for values that are the user's to choose.

_cuslice_groups()
{
	# The admin socket given on the line so far, if any.
	local sock=() i
	for ((i = 1; i < ${#COMP_WORDS[@]} - 1; i++)); do
		case ${COMP_WORDS[i]} in
		--admin-socket) sock=(--admin-socket "${COMP_WORDS[i + 1]}") ;;
		--admin-socket=*) sock=("${COMP_WORDS[i]}") ;;
		esac
	done
	cuslice "${sock[@]}" --no-headers groups 2>/dev/null | while read -r name _; do
		printf '%s\n' "$name"
	done | sort -u
}

_cuslice()
{
	local cur prev words cword
	if declare -F _init_completion >/dev/null; then
		_init_completion || return
	else
		cur=${COMP_WORDS[COMP_CWORD]}
		prev=${COMP_WORDS[COMP_CWORD - 1]}
		words=("${COMP_WORDS[@]}")
		cword=$COMP_CWORD
	fi

	local commands="run self ps gpus groups set delete top status help"
	local global="--admin-socket --socket --output -o --no-headers --help --version"
	local output="--output -o --no-headers --help"

	case $prev in
	-o | --output)
		mapfile -t COMPREPLY < <(compgen -W "table wide json yaml" -- "$cur")
		return
		;;
	--socket | --admin-socket)
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return
		;;
	--mem | --cores | --gpu)
		return
		;;
	esac

	# The command: the first word that is not an option or an option's value.
	local cmd="" i
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-o | --output | --socket | --admin-socket | --mem | --cores | --gpu | --group) ((i++)) ;;
		-*) ;;
		*)
			cmd=${words[i]}
			break
			;;
		esac
	done

	if [[ -z $cmd ]]; then
		if [[ $cur == -* ]]; then
			mapfile -t COMPREPLY < <(compgen -W "$global" -- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
		fi
		return
	fi

	case $cmd in
	run)
		if [[ $prev == --group ]]; then
			mapfile -t COMPREPLY < <(compgen -W "$(_cuslice_groups)" -- "$cur")
		elif [[ $cur == -* ]]; then
			mapfile -t COMPREPLY < <(compgen -W "--mem --cores --gpu --group --burst --help" -- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -c -- "$cur")
		fi
		;;
	self)
		if [[ $prev == --group ]]; then
			mapfile -t COMPREPLY < <(compgen -W "$(_cuslice_groups)" -- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -W "--group $output" -- "$cur")
		fi
		;;
	set)
		if [[ $cur == -* ]]; then
			mapfile -t COMPREPLY < <(compgen -W "--mem --cores --burst --hard --required --optional $output" -- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -W "$(_cuslice_groups)" -- "$cur")
		fi
		;;
	groups | delete)
		if [[ $cur == -* ]]; then
			mapfile -t COMPREPLY < <(compgen -W "$output" -- "$cur")
		else
			mapfile -t COMPREPLY < <(compgen -W "$(_cuslice_groups)" -- "$cur")
		fi
		;;
	ps | gpus | top | status)
		mapfile -t COMPREPLY < <(compgen -W "$output" -- "$cur")
		;;
	help)
		mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
		;;
	esac
}

complete -F _cuslice cuslice
