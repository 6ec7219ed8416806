" A stock Vim 9 LSP client of octet lsp, as yegappan/lsp talks to a
" server: the channel in "lsp" mode, where Vim numbers its own requests
" 1, 2, 3… and takes any incoming message whose id is one of its pending
" request ids for that request's response. Requests from the server are
" answered from the channel callback (window/showMessageRequest:
" "Approve"), as yegappan/lsp answers them: a string id raw (Vim 9.0's
" ch_sendexpr refuses one), a number through the channel. It runs
" octet.prompt and writes the command's answer and everything the
" callback saw to $OCTET_TEST_RESULT as JSON.
let s:log = []
let s:answer = v:null

func s:OnMessage(ch, msg) abort
  call add(s:log, a:msg)
  if type(a:msg) != v:t_dict || !has_key(a:msg, 'id') || !has_key(a:msg, 'method')
    return
  endif
  if a:msg.method ==# 'window/showMessageRequest'
    call s:Reply(a:ch, {'id': a:msg.id, 'result': {'title': 'Approve'}})
  else
    call s:Reply(a:ch, {'id': a:msg.id, 'error': {'code': -32601, 'message': 'not handled'}})
  endif
endfunc

func s:Reply(ch, resp) abort
  if type(a:resp.id) == v:t_string
    let l:body = json_encode(extend({'jsonrpc': '2.0'}, a:resp))
    call ch_sendraw(a:ch, 'Content-Length: ' . len(l:body) . "\r\n\r\n" . l:body)
  else
    call ch_sendexpr(a:ch, a:resp)
  endif
endfunc

func s:OnPrompt(ch, msg) abort
  let s:answer = a:msg
endfunc

func s:Finish(what) abort
  call writefile([json_encode({'status': a:what, 'answer': s:answer, 'messages': s:log})], $OCTET_TEST_RESULT)
  qall!
endfunc

let s:job = job_start([$OCTET_BIN, 'lsp'], {
      \ 'in_mode': 'lsp', 'out_mode': 'lsp', 'err_io': 'file', 'err_name': $OCTET_TEST_STDERR,
      \ 'callback': function('s:OnMessage')})
let s:ch = job_getchannel(s:job)
let s:init = ch_evalexpr(s:ch, {'method': 'initialize', 'params': {
      \ 'processId': getpid(), 'rootUri': 'file://' . $OCTET_TEST_WORKSPACE,
      \ 'clientInfo': {'name': 'Vim'}, 'capabilities': {}}}, {'timeout': 10000})
if type(s:init) != v:t_dict || !has_key(s:init, 'result')
  call s:Finish('initialize failed: ' . string(s:init))
endif
call ch_sendexpr(s:ch, {'method': 'initialized', 'params': {}})
call ch_sendexpr(s:ch, {'method': 'workspace/executeCommand', 'params': {
      \ 'command': 'octet.prompt', 'arguments': ['edit a.txt and b.txt']}},
      \ {'callback': function('s:OnPrompt')})
let s:start = reltime()
while s:answer is v:null && reltimefloat(reltime(s:start)) < 30
  sleep 20m
endwhile
call s:Finish(s:answer is v:null ? 'timed out' : 'answered')
