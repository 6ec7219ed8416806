;;; stock_test.el --- a stock eglot client of octet lsp  -*- lexical-binding: t -*-

;; Emacs with eglot (Debian's elpa-eglot 1.9) as a person uses it: a.txt
;; is visited with eglot managing it through `octet lsp', the person
;; runs octet.prompt and answers every question they are asked.  Octet's
;; approval comes as window/showMessageRequest (`completing-read',
;; answered "Approve"); eglot asks its own "Proceed?" (`y-or-n-p') before
;; it applies a workspace/applyEdit.  Every question is recorded, and the
;; command's answer, the questions and the buffer are written to
;; $OCTET_TEST_RESULT as JSON.

(require 'eglot)
(require 'json)

(defvar octet-test-questions nil "The questions put to the person, in order.")

(defun octet-test--ask (_orig prompt &rest _)
  "Record PROMPT and answer yes, as a person would after reading it."
  (push (substring-no-properties prompt) octet-test-questions)
  t)
(advice-add 'y-or-n-p :around #'octet-test--ask)
(advice-add 'yes-or-no-p :around #'octet-test--ask)
(advice-add 'completing-read :around
            (lambda (_orig prompt &rest _)
              (push (substring-no-properties prompt) octet-test-questions)
              "Approve"))

(defun octet-test--finish (status answer)
  "Write STATUS, ANSWER and what the person saw, then exit."
  (with-temp-file (getenv "OCTET_TEST_RESULT")
    (insert (json-encode
             `((status . ,status)
               (answer . ,answer)
               (questions . ,(vconcat (reverse octet-test-questions)))
               (buffer . ,(with-current-buffer (get-file-buffer octet-test-file)
                            (buffer-substring-no-properties (point-min) (point-max))))))))
  (kill-emacs 0))

(defvar octet-test-file (expand-file-name "a.txt" (getenv "OCTET_TEST_WORKSPACE")))

(setq eglot-sync-connect 30
      eglot-connect-timeout 30
      eglot-autoreconnect nil)
(let* ((root (file-name-as-directory (getenv "OCTET_TEST_WORKSPACE")))
       (buf (find-file-noselect octet-test-file)))
  (with-current-buffer buf
    (text-mode)
    (eglot '(text-mode) (cons 'transient root) 'eglot-lsp-server
           (list (getenv "OCTET_BIN") "lsp") "plaintext"))
  (condition-case err
      (let ((answer (with-current-buffer buf
                      (jsonrpc-request (eglot-current-server) :workspace/executeCommand
                                       '(:command "octet.prompt" :arguments ["edit a.txt"])
                                       :timeout 60))))
        (octet-test--finish "answered" answer))
    (error (octet-test--finish (format "failed: %S" err) nil))))
