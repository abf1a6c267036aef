_swactor() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="swactor"
                ;;
            swactor,bench)
                cmd="swactor__subcmd__bench"
                ;;
            swactor,cache)
                cmd="swactor__subcmd__cache"
                ;;
            swactor,chat)
                cmd="swactor__subcmd__chat"
                ;;
            swactor,complete)
                cmd="swactor__subcmd__complete"
                ;;
            swactor,edge)
                cmd="swactor__subcmd__edge"
                ;;
            swactor,generate)
                cmd="swactor__subcmd__generate"
                ;;
            swactor,help)
                cmd="swactor__subcmd__help"
                ;;
            swactor,model)
                cmd="swactor__subcmd__model"
                ;;
            swactor,node)
                cmd="swactor__subcmd__node"
                ;;
            swactor,orchestrate)
                cmd="swactor__subcmd__orchestrate"
                ;;
            swactor,pool)
                cmd="swactor__subcmd__pool"
                ;;
            swactor,relay)
                cmd="swactor__subcmd__relay"
                ;;
            swactor,run)
                cmd="swactor__subcmd__run"
                ;;
            swactor__subcmd__bench,decode)
                cmd="swactor__subcmd__bench__subcmd__decode"
                ;;
            swactor__subcmd__bench,edge)
                cmd="swactor__subcmd__bench__subcmd__edge"
                ;;
            swactor__subcmd__bench,engine)
                cmd="swactor__subcmd__bench__subcmd__engine"
                ;;
            swactor__subcmd__bench,failover)
                cmd="swactor__subcmd__bench__subcmd__failover"
                ;;
            swactor__subcmd__bench,help)
                cmd="swactor__subcmd__bench__subcmd__help"
                ;;
            swactor__subcmd__bench,pipeline)
                cmd="swactor__subcmd__bench__subcmd__pipeline"
                ;;
            swactor__subcmd__bench,prefix)
                cmd="swactor__subcmd__bench__subcmd__prefix"
                ;;
            swactor__subcmd__bench,products)
                cmd="swactor__subcmd__bench__subcmd__products"
                ;;
            swactor__subcmd__bench,ring)
                cmd="swactor__subcmd__bench__subcmd__ring"
                ;;
            swactor__subcmd__bench,serve)
                cmd="swactor__subcmd__bench__subcmd__serve"
                ;;
            swactor__subcmd__bench,speculate)
                cmd="swactor__subcmd__bench__subcmd__speculate"
                ;;
            swactor__subcmd__bench,structured)
                cmd="swactor__subcmd__bench__subcmd__structured"
                ;;
            swactor__subcmd__bench,wake)
                cmd="swactor__subcmd__bench__subcmd__wake"
                ;;
            swactor__subcmd__bench,wan)
                cmd="swactor__subcmd__bench__subcmd__wan"
                ;;
            swactor__subcmd__bench__subcmd__help,decode)
                cmd="swactor__subcmd__bench__subcmd__help__subcmd__decode"
                ;;
            swactor__subcmd__bench__subcmd__help,edge)
                cmd="swactor__subcmd__bench__subcmd__help__subcmd__edge"
                ;;
            swactor__subcmd__bench__subcmd__help,engine)
                cmd="swactor__subcmd__bench__subcmd__help__subcmd__engine"
                ;;
            swactor__subcmd__bench__subcmd__help,failover)
                cmd="swactor__subcmd__bench__subcmd__help__subcmd__failover"
                ;;
            swactor__subcmd__bench__subcmd__help,help)
                cmd="swactor__subcmd__bench__subcmd__help__subcmd__help"
                ;;
            swactor__subcmd__bench__subcmd__help,pipeline)
                cmd="swactor__subcmd__bench__subcmd__help__subcmd__pipeline"
                ;;
            swactor__subcmd__bench__subcmd__help,prefix)
                cmd="swactor__subcmd__bench__subcmd__help__subcmd__prefix"
                ;;
            swactor__subcmd__bench__subcmd__help,products)
                cmd="swactor__subcmd__bench__subcmd__help__subcmd__products"
                ;;
            swactor__subcmd__bench__subcmd__help,ring)
                cmd="swactor__subcmd__bench__subcmd__help__subcmd__ring"
                ;;
            swactor__subcmd__bench__subcmd__help,serve)
                cmd="swactor__subcmd__bench__subcmd__help__subcmd__serve"
                ;;
            swactor__subcmd__bench__subcmd__help,speculate)
                cmd="swactor__subcmd__bench__subcmd__help__subcmd__speculate"
                ;;
            swactor__subcmd__bench__subcmd__help,structured)
                cmd="swactor__subcmd__bench__subcmd__help__subcmd__structured"
                ;;
            swactor__subcmd__bench__subcmd__help,wake)
                cmd="swactor__subcmd__bench__subcmd__help__subcmd__wake"
                ;;
            swactor__subcmd__bench__subcmd__help,wan)
                cmd="swactor__subcmd__bench__subcmd__help__subcmd__wan"
                ;;
            swactor__subcmd__cache,clear)
                cmd="swactor__subcmd__cache__subcmd__clear"
                ;;
            swactor__subcmd__cache,help)
                cmd="swactor__subcmd__cache__subcmd__help"
                ;;
            swactor__subcmd__cache,ls)
                cmd="swactor__subcmd__cache__subcmd__ls"
                ;;
            swactor__subcmd__cache__subcmd__help,clear)
                cmd="swactor__subcmd__cache__subcmd__help__subcmd__clear"
                ;;
            swactor__subcmd__cache__subcmd__help,help)
                cmd="swactor__subcmd__cache__subcmd__help__subcmd__help"
                ;;
            swactor__subcmd__cache__subcmd__help,ls)
                cmd="swactor__subcmd__cache__subcmd__help__subcmd__ls"
                ;;
            swactor__subcmd__edge,help)
                cmd="swactor__subcmd__edge__subcmd__help"
                ;;
            swactor__subcmd__edge,inspect)
                cmd="swactor__subcmd__edge__subcmd__inspect"
                ;;
            swactor__subcmd__edge__subcmd__help,help)
                cmd="swactor__subcmd__edge__subcmd__help__subcmd__help"
                ;;
            swactor__subcmd__edge__subcmd__help,inspect)
                cmd="swactor__subcmd__edge__subcmd__help__subcmd__inspect"
                ;;
            swactor__subcmd__help,bench)
                cmd="swactor__subcmd__help__subcmd__bench"
                ;;
            swactor__subcmd__help,cache)
                cmd="swactor__subcmd__help__subcmd__cache"
                ;;
            swactor__subcmd__help,chat)
                cmd="swactor__subcmd__help__subcmd__chat"
                ;;
            swactor__subcmd__help,complete)
                cmd="swactor__subcmd__help__subcmd__complete"
                ;;
            swactor__subcmd__help,edge)
                cmd="swactor__subcmd__help__subcmd__edge"
                ;;
            swactor__subcmd__help,generate)
                cmd="swactor__subcmd__help__subcmd__generate"
                ;;
            swactor__subcmd__help,help)
                cmd="swactor__subcmd__help__subcmd__help"
                ;;
            swactor__subcmd__help,model)
                cmd="swactor__subcmd__help__subcmd__model"
                ;;
            swactor__subcmd__help,node)
                cmd="swactor__subcmd__help__subcmd__node"
                ;;
            swactor__subcmd__help,orchestrate)
                cmd="swactor__subcmd__help__subcmd__orchestrate"
                ;;
            swactor__subcmd__help,pool)
                cmd="swactor__subcmd__help__subcmd__pool"
                ;;
            swactor__subcmd__help,relay)
                cmd="swactor__subcmd__help__subcmd__relay"
                ;;
            swactor__subcmd__help,run)
                cmd="swactor__subcmd__help__subcmd__run"
                ;;
            swactor__subcmd__help__subcmd__bench,decode)
                cmd="swactor__subcmd__help__subcmd__bench__subcmd__decode"
                ;;
            swactor__subcmd__help__subcmd__bench,edge)
                cmd="swactor__subcmd__help__subcmd__bench__subcmd__edge"
                ;;
            swactor__subcmd__help__subcmd__bench,engine)
                cmd="swactor__subcmd__help__subcmd__bench__subcmd__engine"
                ;;
            swactor__subcmd__help__subcmd__bench,failover)
                cmd="swactor__subcmd__help__subcmd__bench__subcmd__failover"
                ;;
            swactor__subcmd__help__subcmd__bench,pipeline)
                cmd="swactor__subcmd__help__subcmd__bench__subcmd__pipeline"
                ;;
            swactor__subcmd__help__subcmd__bench,prefix)
                cmd="swactor__subcmd__help__subcmd__bench__subcmd__prefix"
                ;;
            swactor__subcmd__help__subcmd__bench,products)
                cmd="swactor__subcmd__help__subcmd__bench__subcmd__products"
                ;;
            swactor__subcmd__help__subcmd__bench,ring)
                cmd="swactor__subcmd__help__subcmd__bench__subcmd__ring"
                ;;
            swactor__subcmd__help__subcmd__bench,serve)
                cmd="swactor__subcmd__help__subcmd__bench__subcmd__serve"
                ;;
            swactor__subcmd__help__subcmd__bench,speculate)
                cmd="swactor__subcmd__help__subcmd__bench__subcmd__speculate"
                ;;
            swactor__subcmd__help__subcmd__bench,structured)
                cmd="swactor__subcmd__help__subcmd__bench__subcmd__structured"
                ;;
            swactor__subcmd__help__subcmd__bench,wake)
                cmd="swactor__subcmd__help__subcmd__bench__subcmd__wake"
                ;;
            swactor__subcmd__help__subcmd__bench,wan)
                cmd="swactor__subcmd__help__subcmd__bench__subcmd__wan"
                ;;
            swactor__subcmd__help__subcmd__cache,clear)
                cmd="swactor__subcmd__help__subcmd__cache__subcmd__clear"
                ;;
            swactor__subcmd__help__subcmd__cache,ls)
                cmd="swactor__subcmd__help__subcmd__cache__subcmd__ls"
                ;;
            swactor__subcmd__help__subcmd__edge,inspect)
                cmd="swactor__subcmd__help__subcmd__edge__subcmd__inspect"
                ;;
            swactor__subcmd__help__subcmd__model,inspect)
                cmd="swactor__subcmd__help__subcmd__model__subcmd__inspect"
                ;;
            swactor__subcmd__help__subcmd__model,quantize)
                cmd="swactor__subcmd__help__subcmd__model__subcmd__quantize"
                ;;
            swactor__subcmd__help__subcmd__model,synth)
                cmd="swactor__subcmd__help__subcmd__model__subcmd__synth"
                ;;
            swactor__subcmd__help__subcmd__model,tokenize)
                cmd="swactor__subcmd__help__subcmd__model__subcmd__tokenize"
                ;;
            swactor__subcmd__help__subcmd__node,boot)
                cmd="swactor__subcmd__help__subcmd__node__subcmd__boot"
                ;;
            swactor__subcmd__help__subcmd__node,id)
                cmd="swactor__subcmd__help__subcmd__node__subcmd__id"
                ;;
            swactor__subcmd__help__subcmd__orchestrate,pool)
                cmd="swactor__subcmd__help__subcmd__orchestrate__subcmd__pool"
                ;;
            swactor__subcmd__help__subcmd__orchestrate,serve)
                cmd="swactor__subcmd__help__subcmd__orchestrate__subcmd__serve"
                ;;
            swactor__subcmd__help__subcmd__pool,init)
                cmd="swactor__subcmd__help__subcmd__pool__subcmd__init"
                ;;
            swactor__subcmd__help__subcmd__pool,watch)
                cmd="swactor__subcmd__help__subcmd__pool__subcmd__watch"
                ;;
            swactor__subcmd__help__subcmd__relay,serve)
                cmd="swactor__subcmd__help__subcmd__relay__subcmd__serve"
                ;;
            swactor__subcmd__help__subcmd__run,local)
                cmd="swactor__subcmd__help__subcmd__run__subcmd__local"
                ;;
            swactor__subcmd__help__subcmd__run,plan)
                cmd="swactor__subcmd__help__subcmd__run__subcmd__plan"
                ;;
            swactor__subcmd__model,help)
                cmd="swactor__subcmd__model__subcmd__help"
                ;;
            swactor__subcmd__model,inspect)
                cmd="swactor__subcmd__model__subcmd__inspect"
                ;;
            swactor__subcmd__model,quantize)
                cmd="swactor__subcmd__model__subcmd__quantize"
                ;;
            swactor__subcmd__model,synth)
                cmd="swactor__subcmd__model__subcmd__synth"
                ;;
            swactor__subcmd__model,tokenize)
                cmd="swactor__subcmd__model__subcmd__tokenize"
                ;;
            swactor__subcmd__model__subcmd__help,help)
                cmd="swactor__subcmd__model__subcmd__help__subcmd__help"
                ;;
            swactor__subcmd__model__subcmd__help,inspect)
                cmd="swactor__subcmd__model__subcmd__help__subcmd__inspect"
                ;;
            swactor__subcmd__model__subcmd__help,quantize)
                cmd="swactor__subcmd__model__subcmd__help__subcmd__quantize"
                ;;
            swactor__subcmd__model__subcmd__help,synth)
                cmd="swactor__subcmd__model__subcmd__help__subcmd__synth"
                ;;
            swactor__subcmd__model__subcmd__help,tokenize)
                cmd="swactor__subcmd__model__subcmd__help__subcmd__tokenize"
                ;;
            swactor__subcmd__node,boot)
                cmd="swactor__subcmd__node__subcmd__boot"
                ;;
            swactor__subcmd__node,help)
                cmd="swactor__subcmd__node__subcmd__help"
                ;;
            swactor__subcmd__node,id)
                cmd="swactor__subcmd__node__subcmd__id"
                ;;
            swactor__subcmd__node__subcmd__help,boot)
                cmd="swactor__subcmd__node__subcmd__help__subcmd__boot"
                ;;
            swactor__subcmd__node__subcmd__help,help)
                cmd="swactor__subcmd__node__subcmd__help__subcmd__help"
                ;;
            swactor__subcmd__node__subcmd__help,id)
                cmd="swactor__subcmd__node__subcmd__help__subcmd__id"
                ;;
            swactor__subcmd__orchestrate,help)
                cmd="swactor__subcmd__orchestrate__subcmd__help"
                ;;
            swactor__subcmd__orchestrate,pool)
                cmd="swactor__subcmd__orchestrate__subcmd__pool"
                ;;
            swactor__subcmd__orchestrate,serve)
                cmd="swactor__subcmd__orchestrate__subcmd__serve"
                ;;
            swactor__subcmd__orchestrate__subcmd__help,help)
                cmd="swactor__subcmd__orchestrate__subcmd__help__subcmd__help"
                ;;
            swactor__subcmd__orchestrate__subcmd__help,pool)
                cmd="swactor__subcmd__orchestrate__subcmd__help__subcmd__pool"
                ;;
            swactor__subcmd__orchestrate__subcmd__help,serve)
                cmd="swactor__subcmd__orchestrate__subcmd__help__subcmd__serve"
                ;;
            swactor__subcmd__pool,help)
                cmd="swactor__subcmd__pool__subcmd__help"
                ;;
            swactor__subcmd__pool,init)
                cmd="swactor__subcmd__pool__subcmd__init"
                ;;
            swactor__subcmd__pool,watch)
                cmd="swactor__subcmd__pool__subcmd__watch"
                ;;
            swactor__subcmd__pool__subcmd__help,help)
                cmd="swactor__subcmd__pool__subcmd__help__subcmd__help"
                ;;
            swactor__subcmd__pool__subcmd__help,init)
                cmd="swactor__subcmd__pool__subcmd__help__subcmd__init"
                ;;
            swactor__subcmd__pool__subcmd__help,watch)
                cmd="swactor__subcmd__pool__subcmd__help__subcmd__watch"
                ;;
            swactor__subcmd__relay,help)
                cmd="swactor__subcmd__relay__subcmd__help"
                ;;
            swactor__subcmd__relay,serve)
                cmd="swactor__subcmd__relay__subcmd__serve"
                ;;
            swactor__subcmd__relay__subcmd__help,help)
                cmd="swactor__subcmd__relay__subcmd__help__subcmd__help"
                ;;
            swactor__subcmd__relay__subcmd__help,serve)
                cmd="swactor__subcmd__relay__subcmd__help__subcmd__serve"
                ;;
            swactor__subcmd__run,help)
                cmd="swactor__subcmd__run__subcmd__help"
                ;;
            swactor__subcmd__run,local)
                cmd="swactor__subcmd__run__subcmd__local"
                ;;
            swactor__subcmd__run,plan)
                cmd="swactor__subcmd__run__subcmd__plan"
                ;;
            swactor__subcmd__run__subcmd__help,help)
                cmd="swactor__subcmd__run__subcmd__help__subcmd__help"
                ;;
            swactor__subcmd__run__subcmd__help,local)
                cmd="swactor__subcmd__run__subcmd__help__subcmd__local"
                ;;
            swactor__subcmd__run__subcmd__help,plan)
                cmd="swactor__subcmd__run__subcmd__help__subcmd__plan"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        swactor)
            opts="-h -V --help --version run generate orchestrate model node edge cache pool relay chat complete bench help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench)
            opts="-h --help ring wake edge decode pipeline engine products speculate failover serve prefix structured wan help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__decode)
            opts="-h --model --stages --tokens --requantize --synth-1b --repeat --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --requantize)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --repeat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__edge)
            opts="-h --mib --object-bytes --samples --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --mib)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --object-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --samples)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__engine)
            opts="-h --model --requantize --threads --tokens --prompt-tokens --batch --repeat --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --requantize)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prompt-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --batch)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --repeat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__failover)
            opts="-h --stages --resume --model --sequences --tokens --kill-after --repeat --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --stages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sequences)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kill-after)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --repeat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__help)
            opts="ring wake edge decode pipeline engine products speculate failover serve prefix structured wan help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__help__subcmd__decode)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__help__subcmd__edge)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__help__subcmd__engine)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__help__subcmd__failover)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__help__subcmd__pipeline)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__help__subcmd__prefix)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__help__subcmd__products)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__help__subcmd__ring)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__help__subcmd__serve)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__help__subcmd__speculate)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__help__subcmd__structured)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__help__subcmd__wake)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__help__subcmd__wan)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__pipeline)
            opts="-h --model --stages --tokens --requantize --synth-1b --repeat --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --requantize)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --repeat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__prefix)
            opts="-h --model --synth-1b --stages --threads --turns --turn-words --reply-tokens --conversations --system-words --shared-turns --crowd --max-seq-len --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --turns)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --turn-words)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --reply-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --conversations)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --system-words)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --shared-turns)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --crowd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-seq-len)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__products)
            opts="-h --model --formats --cols --threads --rows --repeat --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --formats)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cols)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rows)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --repeat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__ring)
            opts="-h --ring-mib --span-kib --object-mib --total-mib --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --ring-mib)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --span-kib)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --object-mib)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --total-mib)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__serve)
            opts="-h --model --synth-1b --stages --layout --threads --tokens --concurrency --requantize --groups --prefill-budget-ms --http --repeat --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layout)
                    COMPREPLY=($(compgen -W "one-host multi-host" -- "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --concurrency)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --requantize)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --groups)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefill-budget-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --repeat)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__speculate)
            opts="-h --model --grounded --stages --tokens --free --draft-model --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --grounded)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --free)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__structured)
            opts="-h --model --synth-1b --stages --threads --requests --max-tokens --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --requests)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__wake)
            opts="-h --samples --bytes --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --samples)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__bench__subcmd__wan)
            opts="-h --model --stages --loss --rate-mbit --links --tokens --prompt --no-speculate --mixed --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --loss)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --rate-mbit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --links)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prompt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__cache)
            opts="-h --help ls clear help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__cache__subcmd__clear)
            opts="-h --cache --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --cache)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__cache__subcmd__help)
            opts="ls clear help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__cache__subcmd__help__subcmd__clear)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__cache__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__cache__subcmd__help__subcmd__ls)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__cache__subcmd__ls)
            opts="-h --cache --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --cache)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__chat)
            opts="-h --system --server --api-key-file --max-tokens --temperature --seed --stop --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --system)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --server)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --api-key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --temperature)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__complete)
            opts="-h --prompt --stream --server --api-key-file --max-tokens --temperature --seed --stop --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --prompt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --server)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --api-key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --temperature)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stop)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__edge)
            opts="-h --help inspect help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__edge__subcmd__help)
            opts="inspect help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__edge__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__edge__subcmd__help__subcmd__inspect)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__edge__subcmd__inspect)
            opts="-h --node --edge --timeout-ms --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --node)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --edge)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__generate)
            opts="-h --model --prompt --prompt-ids --chat --stages --device --threads --speculate --draft-model --draft-max --max-seq-len --kv-cache --activation-dtype --max-tokens --sampling --temperature --top-k --top-p --seed --max-sequences --json --prompt-cache-bytes --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prompt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prompt-ids)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --device)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --speculate)
                    COMPREPLY=($(compgen -W "off ngram" -- "${cur}"))
                    return 0
                    ;;
                --draft-model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-seq-len)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kv-cache)
                    COMPREPLY=($(compgen -W "f32 f16" -- "${cur}"))
                    return 0
                    ;;
                --activation-dtype)
                    COMPREPLY=($(compgen -W "f32 f16" -- "${cur}"))
                    return 0
                    ;;
                --max-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sampling)
                    COMPREPLY=($(compgen -W "greedy sample" -- "${cur}"))
                    return 0
                    ;;
                --temperature)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top-k)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top-p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-sequences)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prompt-cache-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help)
            opts="run generate orchestrate model node edge cache pool relay chat complete bench help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__bench)
            opts="ring wake edge decode pipeline engine products speculate failover serve prefix structured wan"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__bench__subcmd__decode)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__bench__subcmd__edge)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__bench__subcmd__engine)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__bench__subcmd__failover)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__bench__subcmd__pipeline)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__bench__subcmd__prefix)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__bench__subcmd__products)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__bench__subcmd__ring)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__bench__subcmd__serve)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__bench__subcmd__speculate)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__bench__subcmd__structured)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__bench__subcmd__wake)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__bench__subcmd__wan)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__cache)
            opts="ls clear"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__cache__subcmd__clear)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__cache__subcmd__ls)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__chat)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__complete)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__edge)
            opts="inspect"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__edge__subcmd__inspect)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__generate)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__model)
            opts="inspect synth quantize tokenize"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__model__subcmd__inspect)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__model__subcmd__quantize)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__model__subcmd__synth)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__model__subcmd__tokenize)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__node)
            opts="id boot"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__node__subcmd__boot)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__node__subcmd__id)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__orchestrate)
            opts="pool serve"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__orchestrate__subcmd__pool)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__orchestrate__subcmd__serve)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__pool)
            opts="watch init"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__pool__subcmd__init)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__pool__subcmd__watch)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__relay)
            opts="serve"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__relay__subcmd__serve)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__run)
            opts="plan local"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__run__subcmd__local)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__help__subcmd__run__subcmd__plan)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__model)
            opts="-h --help inspect synth quantize tokenize help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__model__subcmd__help)
            opts="inspect synth quantize tokenize help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__model__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__model__subcmd__help__subcmd__inspect)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__model__subcmd__help__subcmd__quantize)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__model__subcmd__help__subcmd__synth)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__model__subcmd__help__subcmd__tokenize)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__model__subcmd__inspect)
            opts="-h --stages --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --stages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__model__subcmd__quantize)
            opts="-h --in --out --dtype --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --in)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --out)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --dtype)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__model__subcmd__synth)
            opts="-h --out --blocks --hidden --heads --kv-heads --ffn --vocab --context --dtype --tied-embeddings --arch --experts --experts-used --head-dim --seed --vocab-from --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --out)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --blocks)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --hidden)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --heads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kv-heads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --ffn)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --vocab)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --context)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --dtype)
                    COMPREPLY=($(compgen -W "f32 f16 q8_0 q4_0 mxfp4" -- "${cur}"))
                    return 0
                    ;;
                --arch)
                    COMPREPLY=($(compgen -W "llama llama3 qwen2 qwen3 gemma3 qwen3moe qwen2moe mixtral gpt-oss" -- "${cur}"))
                    return 0
                    ;;
                --experts)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --experts-used)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --head-dim)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --vocab-from)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__model__subcmd__tokenize)
            opts="-h --model --text --add-special --parse-special --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --text)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__node)
            opts="-h --help id boot help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__node__subcmd__boot)
            opts="-h --node-id --key --listen --swim --swim-rtt-ms --advertise --relay --relay-only --relay-ca --join --orchestrator --arena-bytes --memory-bytes --prompt-cache-bytes --no-calibrate --device --threads --admin --cache --boot-timeout-ms --max-worker-restarts --stop-on-stdin-eof --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --node-id)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --swim)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --swim-rtt-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --advertise)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --relay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --relay-ca)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --join)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --orchestrator)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --arena-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --memory-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prompt-cache-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --device)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --admin)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cache)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --boot-timeout-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-worker-restarts)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__node__subcmd__help)
            opts="id boot help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__node__subcmd__help__subcmd__boot)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__node__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__node__subcmd__help__subcmd__id)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__node__subcmd__id)
            opts="-h --key --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__orchestrate)
            opts="-h --help pool serve help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__orchestrate__subcmd__help)
            opts="pool serve help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__orchestrate__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__orchestrate__subcmd__help__subcmd__pool)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__orchestrate__subcmd__help__subcmd__serve)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__orchestrate__subcmd__pool)
            opts="-h --pool --model --key --stages --layers --nodes --balance --auto-stages --min-speedup --weights-url --listen --swim --advertise --swim-rtt-ms --window-ms --pool-timeout --relay --relay-only --relay-ca --prompt --chat --requests --stream --queue --groups --prefill-budget-ms --speculate --draft-max --draft-min --draft-model --draft-threads --events --readiness-timeout --token-timeout --no-resume --resume-timeout --max-resumes --no-keep-caches --max-seq-len --kv-cache --activation-dtype --max-tokens --sampling --temperature --top-k --top-p --seed --prompt-cache-bytes --run-id --json --max-sequences --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --pool)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layers)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --nodes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --balance)
                    COMPREPLY=($(compgen -W "speed memory" -- "${cur}"))
                    return 0
                    ;;
                --min-speedup)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --weights-url)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --swim)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --advertise)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --swim-rtt-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --window-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pool-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --relay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --relay-ca)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prompt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --requests)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --queue)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --groups)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefill-budget-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --speculate)
                    COMPREPLY=($(compgen -W "off ngram" -- "${cur}"))
                    return 0
                    ;;
                --draft-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-min)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --events)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --readiness-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --token-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --resume-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-resumes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-seq-len)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kv-cache)
                    COMPREPLY=($(compgen -W "f32 f16" -- "${cur}"))
                    return 0
                    ;;
                --activation-dtype)
                    COMPREPLY=($(compgen -W "f32 f16" -- "${cur}"))
                    return 0
                    ;;
                --max-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sampling)
                    COMPREPLY=($(compgen -W "greedy sample" -- "${cur}"))
                    return 0
                    ;;
                --temperature)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top-k)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top-p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prompt-cache-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --run-id)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-sequences)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__orchestrate__subcmd__serve)
            opts="-h --pool --model --key --stages --layers --nodes --balance --auto-stages --min-speedup --weights-url --listen --swim --advertise --swim-rtt-ms --window-ms --pool-timeout --relay --relay-only --relay-ca --http --grace-s --api-key-file --max-body-bytes --max-connections --max-connections-per-peer --header-timeout-s --body-timeout-s --cors-origin --allowed-host --model-name --speculate --draft-max --draft-min --draft-model --draft-threads --no-resume --resume-timeout --max-resumes --no-keep-caches --max-seq-len --kv-cache --activation-dtype --max-tokens --sampling --temperature --top-k --top-p --seed --prompt-cache-bytes --json --max-sequences --queue --groups --prefill-budget-ms --events --readiness-timeout --token-timeout --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --pool)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layers)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --nodes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --balance)
                    COMPREPLY=($(compgen -W "speed memory" -- "${cur}"))
                    return 0
                    ;;
                --min-speedup)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --weights-url)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --swim)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --advertise)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --swim-rtt-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --window-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pool-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --relay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --relay-ca)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --grace-s)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --api-key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-body-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-connections)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-connections-per-peer)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --header-timeout-s)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --body-timeout-s)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cors-origin)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --allowed-host)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --speculate)
                    COMPREPLY=($(compgen -W "off ngram" -- "${cur}"))
                    return 0
                    ;;
                --draft-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-min)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --resume-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-resumes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-seq-len)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kv-cache)
                    COMPREPLY=($(compgen -W "f32 f16" -- "${cur}"))
                    return 0
                    ;;
                --activation-dtype)
                    COMPREPLY=($(compgen -W "f32 f16" -- "${cur}"))
                    return 0
                    ;;
                --max-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sampling)
                    COMPREPLY=($(compgen -W "greedy sample" -- "${cur}"))
                    return 0
                    ;;
                --temperature)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top-k)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top-p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prompt-cache-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-sequences)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --queue)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --groups)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefill-budget-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --events)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --readiness-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --token-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__pool)
            opts="-h --help watch init help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__pool__subcmd__help)
            opts="watch init help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__pool__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__pool__subcmd__help__subcmd__init)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__pool__subcmd__help__subcmd__watch)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__pool__subcmd__init)
            opts="-h --orchestrator-node-id --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --orchestrator-node-id)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__pool__subcmd__watch)
            opts="-h --pool --key --listen --relay --relay-only --relay-ca --window-ms --until-ready --pool-timeout --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --pool)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --relay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --relay-ca)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --window-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pool-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__relay)
            opts="-h --help serve help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__relay__subcmd__help)
            opts="serve help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__relay__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__relay__subcmd__help__subcmd__serve)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__relay__subcmd__serve)
            opts="-h --listen --host --cert --key --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --listen)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --host)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cert)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --key)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__run)
            opts="-h --help plan local help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__run__subcmd__help)
            opts="plan local help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__run__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__run__subcmd__help__subcmd__local)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__run__subcmd__help__subcmd__plan)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__run__subcmd__local)
            opts="-h --stages --model --layout --threads --arena-bytes --node-logs --serve --http --grace-s --api-key-file --max-body-bytes --max-connections --max-connections-per-peer --header-timeout-s --body-timeout-s --cors-origin --allowed-host --model-name --prompt --chat --requests --stream --queue --groups --prefill-budget-ms --speculate --draft-max --draft-min --draft-model --draft-threads --events --readiness-timeout --token-timeout --no-resume --resume-timeout --max-resumes --no-keep-caches --max-seq-len --kv-cache --activation-dtype --max-tokens --sampling --temperature --top-k --top-p --seed --prompt-cache-bytes --run-id --json --max-sequences --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --stages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layout)
                    COMPREPLY=($(compgen -W "one-host multi-host" -- "${cur}"))
                    return 0
                    ;;
                --threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --arena-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --http)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --grace-s)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --api-key-file)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-body-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-connections)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-connections-per-peer)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --header-timeout-s)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --body-timeout-s)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --cors-origin)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --allowed-host)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --model-name)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prompt)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --requests)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --queue)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --groups)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prefill-budget-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --speculate)
                    COMPREPLY=($(compgen -W "off ngram" -- "${cur}"))
                    return 0
                    ;;
                --draft-max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-min)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --draft-threads)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --events)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --readiness-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --token-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --resume-timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-resumes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-seq-len)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kv-cache)
                    COMPREPLY=($(compgen -W "f32 f16" -- "${cur}"))
                    return 0
                    ;;
                --activation-dtype)
                    COMPREPLY=($(compgen -W "f32 f16" -- "${cur}"))
                    return 0
                    ;;
                --max-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sampling)
                    COMPREPLY=($(compgen -W "greedy sample" -- "${cur}"))
                    return 0
                    ;;
                --temperature)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top-k)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top-p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prompt-cache-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --run-id)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-sequences)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        swactor__subcmd__run__subcmd__plan)
            opts="-h --model --pool --stages --layers --nodes --balance --auto-stages --min-speedup --prompt-tokens --weights-url --run-id --max-seq-len --kv-cache --activation-dtype --max-tokens --sampling --temperature --top-k --top-p --seed --max-sequences --prompt-cache-bytes --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --model)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pool)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --layers)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --nodes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --balance)
                    COMPREPLY=($(compgen -W "speed memory" -- "${cur}"))
                    return 0
                    ;;
                --min-speedup)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prompt-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --weights-url)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --run-id)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-seq-len)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --kv-cache)
                    COMPREPLY=($(compgen -W "f32 f16" -- "${cur}"))
                    return 0
                    ;;
                --activation-dtype)
                    COMPREPLY=($(compgen -W "f32 f16" -- "${cur}"))
                    return 0
                    ;;
                --max-tokens)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --sampling)
                    COMPREPLY=($(compgen -W "greedy sample" -- "${cur}"))
                    return 0
                    ;;
                --temperature)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top-k)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top-p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --seed)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-sequences)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --prompt-cache-bytes)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _swactor -o nosort -o bashdefault -o default swactor
else
    complete -F _swactor -o bashdefault -o default swactor
fi
