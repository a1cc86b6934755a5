// Minimal VS Code client for `meshc lsp`: starts the server over stdio for .msh files.
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const config = vscode.workspace.getConfiguration("mesh");
  const command = config.get("server.path") || "meshc";
  const args = ["lsp", ...(config.get("server.extraArgs") || [])];
  const stdlib = config.get("stdlib");
  const serverOptions = { command, args, options: { env: process.env } };
  const clientOptions = {
    documentSelector: [{ scheme: "file", language: "mesh" }],
    initializationOptions: stdlib ? { stdlib } : {},
  };
  client = new LanguageClient("meshc", "meshc language server", serverOptions, clientOptions);
  client.start();
  context.subscriptions.push({ dispose: () => client && client.stop() });
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
